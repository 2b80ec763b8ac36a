"""HTTP routes: thin translations between the wire and the serving layer."""
