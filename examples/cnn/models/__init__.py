"""Models for train_cnn.py; each module has create_model(num_classes, num_channels)."""
