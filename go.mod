module github.com/edgesecrets/edgesecrets

go 1.26

require (
	github.com/natefinch/atomic v1.0.1
	github.com/stretchr/testify v1.12.1
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
