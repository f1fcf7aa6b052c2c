"""The three-card games: Liêng (``lieng``), Liêng Sảnh (``lieng_sanh``), 3 Cây Gà
(``bacay_ga``) and Ba Cây Chương (``bacay_chuong``), on their shared engine: ``threecard``
(what a hand is worth) and ``threecard_play`` (how a hand goes: betting, the flip, the
award)."""
