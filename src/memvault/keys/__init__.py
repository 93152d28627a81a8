"""Keys: key slots that unlock a store's master keys and the subkeys derived from them (``slots``),
and the keyring of wrapped data keys with its MAC-chained high-water mark (``keyring``; the
high-water marks, the freshness rule and the side branches' records in ``marks``).
"""
