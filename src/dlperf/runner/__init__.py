"""The sweep: plan the cells, launch one child per cell, collect what the worker reports."""
