"""The Bayesian SVM, alone and joint with the model."""
