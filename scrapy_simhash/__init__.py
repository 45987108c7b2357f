"""Near-duplicate detection for Scrapy items: SimHash fingerprints, MinHash band index, Jaccard verification."""

from scrapy_simhash.addon import Addon
from scrapy_simhash.fingerprint import hamming, jaccard, shingles, simhash

__all__ = ["Addon", "hamming", "jaccard", "shingles", "simhash"]
__version__ = "0.1.0"
