"""The workspace on disk: its SQLite store and migrations, the folder and its writer lock, the life
of a wave's files (`waves`), and the compaction of finished waves.

Every write to the database is here, a named function of the module that owns its table
(`requests`, `threads`, `runs`, `anomalies`, `judge_words`, `waves`, `store.write_meta`), run inside the caller's
transaction; the rows handed up are typed (`waves.FileRow`, `requests.RequestRow`).
"""
