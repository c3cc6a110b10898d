"""PostgreSQL's migrations: `NNNN_what_it_does.sql` takes a PostgreSQL database from version
NNNN - 1 to NNNN, beside the SQLite file of the same version in `umaserver/storage/migrations/`.

PostgreSQL databases begin at `FIRST_VERSION`: every version after it has a file here and one
there, and `migrations()` refuses a gap. A new database gets `../schema.sql`, the whole current
schema, as a new SQLite database gets its own.
"""
