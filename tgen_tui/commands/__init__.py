"""CLI verb implementations (argparse registration + handlers), one module per group."""
