"""The climbing (shedding) games: Tiến Lên Miền Nam đếm lá (``tienlen``) and Sâm Lốc
(``samloc``), on their shared engine: ``shedding`` (combinations, beating, chops, penalty
values; each game's differences as data) and ``shedding_play`` (rounds, passes, chop
chains, the hand on the game kit)."""
