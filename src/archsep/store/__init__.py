"""The results store: one SQLite database per output directory (`db`), the rows it holds and their
checks (`rows`), the `[analysis]` table's one schema (`analysis_table`), moving runs between
stores (`transfer`: jsonl export and import) and mirroring finished runs to trackers
(`tracking`). Reading a store reads data, never code."""
from __future__ import annotations

from .db import DB_NAME, Store, disk_full, open_store, prepare_out
from .rows import RESULT_COLUMNS, STATUSES, Damaged, check_config, check_row, now, record, result_from_row

__all__ = ["DB_NAME", "RESULT_COLUMNS", "STATUSES", "Damaged", "Store", "check_config", "check_row", "disk_full", "now",
           "open_store", "prepare_out", "record", "result_from_row"]
