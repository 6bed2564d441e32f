"""ragweedd: local document indexer and question-answering daemon.

Importing this package must stay cheap: ragweedctl imports it and must start in well under 100 ms.
"""

__version__ = "0.1.0"
