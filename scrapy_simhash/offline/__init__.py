"""What the ``simhash-*`` commands run outside a crawl: measuring the index and a threshold on a
corpus (``evaluate``, ``tune``, ``reevaluate``), the review pages (``review_pairs``, ``review_page``),
erasing a page (``erase``), and reading their input files (``input_files``, ``progress``). A crawl
imports none of it.
"""
