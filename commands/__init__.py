"""Command-line tools that sit above every package they use: ``python -m rewards score|passk``."""
