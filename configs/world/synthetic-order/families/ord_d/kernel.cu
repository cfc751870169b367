// SYNTHETIC family: never compiled or timed. Its table is computed by
// tools/bench/world/synth_order.py; this file only satisfies the family format.
