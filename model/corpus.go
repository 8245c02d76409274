package model

import (
	"fmt"
	"strings"
)

// tinyProse is the hand-written part of the tiny tokenizer's training text: the words and
// LaTeX that debates about math problems are made of.
const tinyProse = `You are a helpful assistant. Solve the problem step by step, and put your final answer
within \boxed{}. Think about the question carefully before you answer it.

The question asks for the number of apples that remain. There were several apples in the
basket, and then some of them were eaten. We subtract the eaten apples from the total, so the
answer is the difference of the two numbers. Let me check the other agents' answers: the first
agent says the answer is correct, the second agent disagrees with the reasoning.

Let $x$ be the unknown value. Then $2x + 3 = 11$, so $2x = 8$ and $x = 4$. Therefore the
answer is $\boxed{4}$. We can verify this: $2 \cdot 4 + 3 = 11$, which is correct.

The area of a circle with radius $r$ is $\pi r^2$. If $r = 3$, the area is $9\pi$.
The sum of the first $n$ positive integers is $\frac{n(n+1)}{2}$, and the sum of their squares
is $\frac{n(n+1)(2n+1)}{6}$. For the equation $x^2 - 5x + 6 = 0$ the solutions are $x = 2$
and $x = 3$, since $(x - 2)(x - 3) = 0$. The probability of the event is $\frac{1}{4}$.
Since $\sqrt{16} = 4$ and $\sqrt{9} = 3$, the distance between the points is $\sqrt{25} = 5$.
We have $\left( \frac{a}{b} \right)^2 = \frac{a^2}{b^2}$ and $\log_2 8 = 3$.
The angle is $90^\circ$, the triangle is a right triangle, and the hypotenuse is the longest
side. The function $f(x) = x^3$ is increasing, so $f(a) < f(b)$ whenever $a < b$.

Other agents said the answer is different. After reviewing their solutions, I still think my
answer is right, because the reasoning in each step is correct. However, the second solution
made an error in the last step. Therefore, the final answer is the same as before.

A train travels at a constant speed of sixty miles per hour. How far does it travel in three
hours? Distance equals speed multiplied by time, so the train travels one hundred and eighty
miles. A store sells pencils in boxes of twelve; a teacher buys enough boxes for every student
in her class to receive two pencils. Each week, Maria saves part of her allowance; after a
month she counts her savings and finds that she has enough money to buy the book she wanted.

Consider the sequence defined by $a_1 = 1$ and $a_{n+1} = 2a_n + 1$. Computing the first terms
gives $1, 3, 7, 15, 31$, which suggests that $a_n = 2^n - 1$. We prove this by induction: the
base case holds, and if $a_k = 2^k - 1$ then $a_{k+1} = 2(2^k - 1) + 1 = 2^{k+1} - 1$.
The matrix $\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}$ has determinant $1 \cdot 4 - 2 \cdot 3 = -2$.
Let $f(x) = \sin x + \cos x$; then $f'(x) = \cos x - \sin x$, and $\int_0^{\pi} \sin x \, dx = 2$.
The number of ways to choose $k$ objects from $n$ is $\binom{n}{k} = \frac{n!}{k!(n-k)!}$.
We know that $\gcd(12, 18) = 6$ and $\operatorname{lcm}(4, 6) = 12$, and $17 \equiv 2 \pmod{5}$.
Every prime number greater than two is odd, and there are infinitely many prime numbers.
The expected value of a fair die roll is $\frac{1 + 2 + 3 + 4 + 5 + 6}{6} = \frac{7}{2}$.

Let us think again about the problem. My previous answer may have been wrong, since I forgot
to include the last term of the sum. Reconsidering the other agents' arguments, I agree with
the first agent: the correct total is larger. Still, I should double check each calculation,
because a careful solution is more convincing than a confident one. In conclusion, we find
that the probability is one half, and the expected number of heads is therefore equal to the
number of coin flips divided by two. I am confident that this reasoning is sound.
`

// tinyCorpus is the training text: the prose plus arithmetic questions and answers.
func tinyCorpus() string {
	var sb strings.Builder
	sb.WriteString(tinyProse)
	for a := 3; a < 60; a += 7 {
		for b := 2; b < 30; b += 9 {
			fmt.Fprintf(&sb, "What is %d + %d? We add the numbers: %d + %d = %d. The answer is \\boxed{%d}.\n", a, b, a, b, a+b, a+b)
			fmt.Fprintf(&sb, "What is %d times %d? We multiply: %d \\times %d = %d. The answer is \\boxed{%d}.\n", a, b, a, b, a*b, a*b)
			fmt.Fprintf(&sb, "Tom has %d marbles and gives away %d of them. How many marbles are left? %d - %d = %d, so \\boxed{%d}.\n", a+b, b, a+b, b, a, a)
		}
	}
	return sb.String()
}
