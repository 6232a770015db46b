"""The installed replayer: ``softrank_replay.replay`` is replay/replay.py unchanged.

Nothing is imported here: ``softrank-replay`` (``softrank_replay.cli``) loads only the
standard library and that file, never the ``softrank`` package.
"""
