"""The review UI's pages: one module per kind of page over ``base`` (login, CSRF, errors, headers)."""
