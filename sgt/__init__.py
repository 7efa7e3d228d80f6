"""Stochastic Gradient Trees (Gouk, Pfahringer and Frank, ACML 2019) for online learning."""
