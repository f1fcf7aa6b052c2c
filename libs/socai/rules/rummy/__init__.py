"""The rummy game: Phỏm / Tá Lả (``phom``), with its pure card logic and payment table
(``phom_melds``)."""
