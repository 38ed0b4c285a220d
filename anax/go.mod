module github.com/edgesecrets/edgesecrets/anax

go 1.26.0

require (
	github.com/edgesecrets/edgesecrets v0.0.0-00010101000000-000000000000
	github.com/open-horizon/anax v0.0.0-20260720150311-2f3fa5a506d6
)
