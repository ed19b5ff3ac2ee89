"""Labelled data outside a run: export/import (Parquet + Minari), lazy label streams, seeding a run from old labels."""
