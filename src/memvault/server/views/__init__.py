"""The API's views, one module per kind of endpoint over ``base`` (authentication, rights, bodies,
errors, headers): stores, memories, versions, tool (a memvault extension), health."""
