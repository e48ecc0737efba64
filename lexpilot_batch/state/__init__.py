"""The workspace on disk: its SQLite store and migrations, the folder and its writer lock, the life
of a wave's files (`waves`), and the compaction of finished waves.
"""
