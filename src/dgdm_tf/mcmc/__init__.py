"""What every chain shares: mixing diagnostics, tempered burn-in."""
