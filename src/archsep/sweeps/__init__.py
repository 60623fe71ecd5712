"""Sweeps: the sweep file (`file`: TOML arms x grid axes x seeds over any RunConfig field, read
and checked into RunConfigs) and writing one back (`toml`: a preset or a sweep as a file)."""
