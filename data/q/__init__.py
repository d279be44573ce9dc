"""q from Python: the map between Python values and q's printed forms, with which a q problem's Python twin makes
and checks its q tests without a q binary."""
