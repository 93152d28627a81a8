"""Keys: key slots that unlock a store's master keys and the subkeys derived from them (``slots``),
the keyring of wrapped data keys and its MAC chain (``keyring``) and the high-water marks (``marks``).
"""
