"""The DynamoDB adapter: one small class per port of app/rows.py, each on the same metered
Table (store/table.py), composed by `dynamo_rows`; `commit` turns a Change into one
transaction; `OneTable` is the one-object view for callers that still take one store."""

from tenure.store.codec import load_image
from tenure.store.dynamo.rows import dynamo_rows, rows_on
from tenure.store.dynamo.view import OneTable

__all__ = ["OneTable", "dynamo_rows", "load_image", "rows_on"]
