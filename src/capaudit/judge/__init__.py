"""Judged metrics: one judge layer (:mod:`.core`) over the registered LLM/VLM backends.

Metric modules (:mod:`.factuality`, :mod:`.dcscore`, :mod:`.capability`,
:mod:`.faithscore`, :mod:`.capscore`, :mod:`.validate`) each build tasks,
let :class:`~capaudit.judge.core.Judge` ask them, and do the arithmetic;
:mod:`.runner` is the one command path (config, evidence, store).
"""

from capaudit.judge.core import Judge, JudgeConfig, ParseError, Task, Verdict

__all__ = ["Judge", "JudgeConfig", "ParseError", "Task", "Verdict"]
