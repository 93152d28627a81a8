"""The review UI: server-side pages over a store's history, checks, dreams and redactions
(``memvault ui`` for one store, and ``/ui/`` of ``memvault serve``).

Pages are Jinja2 templates (autoescaped) on Starlette, as the server's API is; ``app`` owns the
route table, ``views`` one module per kind of page over ``views.base`` (login, CSRF, errors,
headers), ``textview`` turns untrusted text and diffs into escaped markup, ``sessions`` the
login token and session cookies, ``jobs`` the work a page starts and shows when done,
``backend`` which store a request reaches and with what rights. docs/ui.md describes it.
"""
