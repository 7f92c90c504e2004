"""Compiler oracle for the parity tests.

``tests/oracle/lower.py`` lowers kernel fixture files with the real tilelang
compiler and prints, as JSON, the facts tilelint's static model must reproduce.
It is meant to be run as a subprocess with the interpreter of the venv that has
tilelang installed; it imports nothing from tilelint.  See README.md.
"""
