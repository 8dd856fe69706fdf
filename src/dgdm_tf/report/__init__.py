"""Tables and figures: the paper's numbers beside ours."""
