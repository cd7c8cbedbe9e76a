"""tagtorch: ranking in social tagging systems with PyTorch."""
