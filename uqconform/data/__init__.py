"""Data files shipped with uqconform (see README.md here); read them through
`uqconform.datasets`."""
