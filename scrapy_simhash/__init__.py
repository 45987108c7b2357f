"""Near-duplicate detection for Scrapy items with SimHash fingerprints and a banded index."""

from scrapy_simhash.fingerprint import band_keys, hamming, jaccard, shingles, simhash

__all__ = ["band_keys", "hamming", "jaccard", "shingles", "simhash"]
__version__ = "0.1.0"
