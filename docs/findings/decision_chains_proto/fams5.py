"""fams3 (label-anchored total/count/largest) + fams4 (hop) together."""
import fams3, fams4
FAMILIES = {**fams3.FAMILIES, **fams4.FAMILIES}
