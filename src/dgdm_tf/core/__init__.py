"""The model's building blocks: the axis layout, convolution ops, the deep model, compiled steps."""
