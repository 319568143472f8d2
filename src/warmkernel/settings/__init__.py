"""Settings: every tunable, its default and its scope; the layers (files, environment) that set them."""
