"""impactlab's version, in one place (the package, the CLI and saved sweeps read it)."""

VERSION = "0.1.0"
