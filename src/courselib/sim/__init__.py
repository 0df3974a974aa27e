"""Simulations in time (simpy): schedulers, barriers and timelines built on the pure ``model``."""
