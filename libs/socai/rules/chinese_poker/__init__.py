"""The Chinese-poker game: Mậu Binh (``maubinh``), with its pure hands (``maubinh_hands``:
chi values, arrangements, special hands, comparison, the auto-arranger)."""
