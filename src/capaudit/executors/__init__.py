"""Executors run one shard function over many shards: locally or on Ray."""

from capaudit.executors.base import EXECUTORS, Executor, get_executor

__all__ = ["EXECUTORS", "Executor", "get_executor"]
