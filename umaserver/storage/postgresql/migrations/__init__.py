"""PostgreSQL's migrations: `NNNN_what_it_does.sql` takes a PostgreSQL database from version
NNNN - 1 to NNNN, beside the SQLite file of the same version in `umaserver/storage/migrations/`.

PostgreSQL databases begin at `FIRST_VERSION` (`../schema.sql`, the whole schema of that version):
every version after it has a file here and one there, and `migrations()` refuses a gap. There is
none yet: the schema of a new database is the current one.
"""
