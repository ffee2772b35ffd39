"""A small but faithful Marvell_cloud mirror, built in seconds, for the demo and the tests."""
