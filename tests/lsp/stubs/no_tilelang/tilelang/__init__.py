# A stand-in for an environment without tilelang: importing it fails the way a
# missing package does (the LSP tests put this directory first on PYTHONPATH).
raise ModuleNotFoundError("No module named 'tilelang' (tilelint test stub)", name="tilelang")
