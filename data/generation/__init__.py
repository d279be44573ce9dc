"""Generation and strengthening: new tests made by running a problem's solution on inputs of its own making, chosen
so that the wrong programs a model writes first fail them (Python, and q through its Python twin)."""
