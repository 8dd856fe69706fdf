"""Monte Carlo EM: the test-time MAP (supplement Algorithm 2), stochastic MCEM (Algorithm 1), model averaging."""
