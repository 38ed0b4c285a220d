package ohsecret_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/edgesecrets/edgesecrets"
	"github.com/edgesecrets/edgesecrets/ohsecret"
)

// A store secret's data maps onto Open Horizon's {key,value} body, the
// body anax's agbot serves to hzn secretsmanager secret read; printing it
// never shows the value.
func ExampleFromData() {
	for _, data := range []edgesecrets.Data{
		{"key": []byte("name"), "value": []byte("World")},   // written through Open Horizon
		{"password": []byte("pw")},                          // one entry
		{"user": []byte("alice"), "password": []byte("pw")}, // several entries
	} {
		d, err := ohsecret.FromData(data)
		if err != nil {
			panic(err)
		}
		fmt.Println(d)
		fmt.Println(string(d.Marshal()))
	}

	// A write's body, as hzn sends it, read with a bound.
	d, err := ohsecret.Decode(strings.NewReader(`{"key":"name","value":"World"}`), ohsecret.MaxBodySize)
	fmt.Println(d.Key, err, d.Data().Keys())
	_, err = ohsecret.Decode(strings.NewReader(`{"key":"name","value":"a long value"}`), 16)
	fmt.Println(errors.Is(err, ohsecret.ErrTooLarge))
	// Output:
	// {Key:"name" Value:[redacted]}
	// {
	//   "key": "name",
	//   "value": "World"
	// }
	// {Key:"password" Value:[redacted]}
	// {
	//   "key": "password",
	//   "value": "pw"
	// }
	// {Key:"" Value:[redacted]}
	// {
	//   "key": "",
	//   "value": "{\"password\":\"pw\",\"user\":\"alice\"}"
	// }
	// name <nil> [key value]
	// true
}
