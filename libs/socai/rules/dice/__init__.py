"""The dice game: Tài Xỉu (``taixiu``)."""
