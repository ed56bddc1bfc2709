"""v1model architecture: device, pipeline runtime, externs, hashes and traffic manager."""
