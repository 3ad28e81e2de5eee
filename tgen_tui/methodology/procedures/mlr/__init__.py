"""RFC 9971 multiple loss ratio search (tgen search)."""
